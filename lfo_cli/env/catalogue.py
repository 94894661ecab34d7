"""Public, industry-level knowledge of the customer-service world (the *prior*).

Everything in this module is knowledge that transfers across companies: which departments an
industry has, what they do, which services they handle, and which identity fields they *usually*
require (with the usual alternative route when a customer lacks one field). Company-specific
exceptions are drawn by :mod:`lfo_cli.env.generate`; they are never visible here. The ``prior``
reference policy may read this module, the ``oracle`` reads the generated world.
"""

from __future__ import annotations

from dataclasses import dataclass

# The universe of identity fields a department may ask for. Order is the canonical order used
# whenever a set of fields is rendered (forms, replies, JSON), so outputs are deterministic.
FIELDS: tuple[str, ...] = (
    "account_number",
    "last_4_ssn",
    "date_of_birth",
    "zip_code",
    "pin",
    "policy_number",
    "member_id",
    "card_last_4",
    "email",
    "phone_on_file",
    "order_number",
    "security_answer",
)
FIELD_SET = frozenset(FIELDS)
FIELD_ORDER = {f: i for i, f in enumerate(FIELDS)}

# The customer answers ONE form of at most this many fields. With 12 fields in the universe this
# rules out "ask for everything": an agent has to know (or find out) what the departments need.
# The generator guarantees every task's needs fit (the oracle's form never exceeds it).
MAX_FORM_FIELDS = 6

# The key under which a caller passes a reference code obtained from an earlier department.
REFERENCE_KEY = "reference_code"


def sort_fields(fields) -> list[str]:
    """Fields in canonical order (unknown names last, alphabetically)."""
    return sorted(fields, key=lambda f: (FIELD_ORDER.get(f, len(FIELDS)), f))


@dataclass(frozen=True)
class DepartmentSpec:
    """An industry's standard department: purpose, services, usual requirements and alternatives."""

    name: str
    purpose: str  # one line, shown in the directory
    services: tuple[str, ...]  # goal phrases this department handles ("dispute a charge")
    requires: tuple[str, ...]  # the industry-standard identity fields
    alternatives: tuple[tuple[str, tuple[str, ...]], ...]  # field -> fields accepted instead


def _d(name, purpose, services, requires, alternatives) -> DepartmentSpec:
    return DepartmentSpec(
        name=name,
        purpose=purpose,
        services=tuple(services),
        requires=tuple(requires),
        alternatives=tuple((f, tuple(a)) for f, a in alternatives.items()),
    )


# industry -> (company-name nouns, departments). Every department has at least one alternative
# route (needed for difficulty-4 tasks) and its alternative fields never overlap its requirements.
INDUSTRIES: dict[str, tuple[tuple[str, ...], tuple[DepartmentSpec, ...]]] = {
    "banking": (
        ("Bank", "Savings", "Credit Union", "Trust", "Financial"),
        (
            _d("Customer Service", "general account questions, balances and statements",
               ["check the account balance", "request a copy of a statement", "update the mailing address"],
               ["account_number", "last_4_ssn"], {"last_4_ssn": ["date_of_birth", "zip_code"]}),
            _d("Fraud", "disputed charges, stolen cards and suspicious activity",
               ["dispute a charge", "report a stolen card", "report suspicious activity"],
               ["card_last_4", "date_of_birth"], {"card_last_4": ["account_number", "zip_code"]}),
            _d("Cards", "card replacements, activations and limits",
               ["order a replacement card", "activate a new card", "raise the card limit"],
               ["card_last_4", "zip_code"], {"card_last_4": ["account_number", "phone_on_file"]}),
            _d("Loans", "loan applications, payoffs and rates",
               ["ask about a loan payoff amount", "apply for a personal loan", "change a loan due date"],
               ["account_number", "date_of_birth", "zip_code"], {"date_of_birth": ["last_4_ssn"]}),
            _d("Account Security", "locked accounts, PIN and password resets",
               ["unlock the online account", "reset the debit card PIN", "update the security question"],
               ["account_number", "pin"], {"pin": ["security_answer", "date_of_birth"]}),
            _d("Online Banking", "app access, alerts and online transfers",
               ["set up account alerts", "fix a failed online transfer", "enable mobile deposits"],
               ["email", "account_number"], {"email": ["phone_on_file"]}),
        ),
    ),
    "insurance": (
        ("Insurance", "Mutual", "Assurance", "Underwriters", "Indemnity"),
        (
            _d("Customer Service", "policy questions and documents",
               ["request a proof of insurance", "ask about policy coverage", "update the policy address"],
               ["policy_number", "date_of_birth"], {"policy_number": ["last_4_ssn", "zip_code"]}),
            _d("Claims", "filing and tracking claims",
               ["file a new claim", "check the status of a claim", "upload claim photos"],
               ["policy_number", "zip_code"], {"zip_code": ["phone_on_file"]}),
            _d("Billing", "premiums, payments and refunds",
               ["pay the premium", "ask about a premium increase", "request a refund"],
               ["policy_number", "email"], {"email": ["phone_on_file"]}),
            _d("Policy Changes", "adding drivers, vehicles and coverage changes",
               ["add a driver to the policy", "add a vehicle", "raise the deductible"],
               ["policy_number", "last_4_ssn"], {"last_4_ssn": ["date_of_birth", "zip_code"]}),
            _d("Account Security", "online account access and PIN resets",
               ["reset the online account password", "unlock the policy portal", "change the account PIN"],
               ["policy_number", "pin"], {"pin": ["security_answer"]}),
        ),
    ),
    "telecom": (
        ("Wireless", "Telecom", "Mobile", "Communications", "Networks"),
        (
            _d("Customer Service", "plans, upgrades and general questions",
               ["change the phone plan", "upgrade a device", "ask about international roaming"],
               ["account_number", "pin"], {"pin": ["last_4_ssn"]}),
            _d("Billing", "bills, payments and credits",
               ["dispute a bill", "set up autopay", "ask about a late fee"],
               ["account_number", "zip_code"], {"account_number": ["phone_on_file", "email"]}),
            _d("Technical Support", "connectivity, devices and outages",
               ["fix dropped calls", "troubleshoot slow internet", "set up voicemail"],
               ["phone_on_file", "zip_code"], {"phone_on_file": ["account_number"]}),
            _d("Porting", "number transfers in and out",
               ["port a number to another carrier", "get a number transfer PIN", "cancel a port request"],
               ["account_number", "pin", "last_4_ssn"], {"last_4_ssn": ["date_of_birth"]}),
            _d("Account Security", "SIM swaps, locked accounts and fraud",
               ["report a suspicious SIM swap", "unlock the account", "reset the account PIN"],
               ["phone_on_file", "security_answer"], {"security_answer": ["last_4_ssn", "date_of_birth"]}),
        ),
    ),
    "utilities": (
        ("Power", "Energy", "Water", "Gas & Electric", "Utilities"),
        (
            _d("Customer Service", "general questions and account updates",
               ["update the contact details", "ask about a rate plan", "request a paperless bill"],
               ["account_number", "zip_code"], {"account_number": ["phone_on_file", "last_4_ssn"]}),
            _d("Billing", "bills, payment plans and due dates",
               ["set up a payment plan", "dispute a high bill", "change the bill due date"],
               ["account_number", "email"], {"email": ["phone_on_file"]}),
            _d("Outages", "outage reports and restoration times",
               ["report an outage", "check a restoration estimate", "report a downed line"],
               ["zip_code", "phone_on_file"], {"phone_on_file": ["account_number"]}),
            _d("Start Stop Service", "moving, starting and stopping service",
               ["start service at a new address", "stop service before moving", "transfer service to a new home"],
               ["account_number", "last_4_ssn", "date_of_birth"], {"last_4_ssn": ["pin"]}),
            _d("Energy Programs", "rebates, audits and efficiency programs",
               ["apply for a rebate", "schedule a home energy audit", "join the budget billing program"],
               ["account_number", "email"], {"account_number": ["zip_code", "phone_on_file"]}),
        ),
    ),
    "healthcare": (
        ("Health", "Medical Group", "Care", "Health Plan", "Clinics"),
        (
            _d("Member Services", "benefits, ID cards and coverage questions",
               ["request a new member ID card", "ask about coverage", "change the primary care doctor"],
               ["member_id", "date_of_birth"], {"member_id": ["last_4_ssn", "zip_code"]}),
            _d("Claims", "claim status and appeals",
               ["check a claim status", "appeal a denied claim", "submit an out-of-network claim"],
               ["member_id", "zip_code"], {"zip_code": ["phone_on_file"]}),
            _d("Billing", "premiums and patient balances",
               ["pay a patient balance", "set up premium autopay", "ask about a bill"],
               ["member_id", "email"], {"email": ["phone_on_file"]}),
            _d("Pharmacy", "prescriptions, refills and mail order",
               ["refill a prescription", "transfer a prescription", "set up mail-order delivery"],
               ["member_id", "date_of_birth", "zip_code"], {"zip_code": ["phone_on_file"]}),
            _d("Account Security", "portal access and privacy requests",
               ["reset the patient portal password", "request medical records access", "unlock the portal"],
               ["member_id", "pin"], {"pin": ["security_answer", "date_of_birth"]}),
        ),
    ),
    "retail": (
        ("Outfitters", "Market", "Goods", "Emporium", "Supply"),
        (
            _d("Customer Service", "orders, shipping and general questions",
               ["track an order", "change a shipping address", "cancel an order"],
               ["email", "order_number"], {"order_number": ["card_last_4", "zip_code"]}),
            _d("Returns", "returns, exchanges and refunds",
               ["return an item", "exchange an item for another size", "check a refund status"],
               ["order_number", "zip_code"], {"order_number": ["email", "card_last_4"]}),
            _d("Billing", "payments, store credit and gift cards",
               ["dispute a store charge", "check a gift card balance", "update the payment card"],
               ["card_last_4", "email"], {"card_last_4": ["zip_code", "phone_on_file"]}),
            _d("Loyalty Program", "points, rewards and membership",
               ["redeem loyalty points", "fix missing reward points", "upgrade the membership tier"],
               ["member_id", "email"], {"member_id": ["phone_on_file"]}),
            _d("Account Security", "account lockouts and password resets",
               ["unlock the store account", "reset the account password", "remove an unknown device"],
               ["email", "pin"], {"pin": ["security_answer", "phone_on_file"]}),
        ),
    ),
    "travel": (
        ("Airlines", "Air", "Travel", "Airways", "Cruises"),
        (
            _d("Reservations", "bookings, changes and cancellations",
               ["change a flight", "cancel a reservation", "book a new trip"],
               ["order_number", "date_of_birth"], {"order_number": ["email", "card_last_4"]}),
            _d("Baggage", "lost, delayed and damaged bags",
               ["report a lost bag", "claim a damaged suitcase", "track a delayed bag"],
               ["order_number", "phone_on_file"], {"phone_on_file": ["email"]}),
            _d("Loyalty Program", "miles, status and award travel",
               ["claim missing miles", "book an award ticket", "check the status tier"],
               ["member_id", "email"], {"member_id": ["date_of_birth", "zip_code"]}),
            _d("Refunds", "refunds and travel credits",
               ["request a refund for a cancelled trip", "use a travel credit", "check a refund status"],
               ["order_number", "card_last_4"], {"card_last_4": ["zip_code"]}),
            _d("Customer Service", "special assistance and general questions",
               ["request wheelchair assistance", "ask about pet travel rules", "update the passenger name"],
               ["email", "phone_on_file"], {"phone_on_file": ["date_of_birth"]}),
        ),
    ),
}

INDUSTRY_NAMES: tuple[str, ...] = tuple(INDUSTRIES)
DEPARTMENT_SPECS: dict[tuple[str, str], DepartmentSpec] = {
    (ind, d.name): d for ind, (_, depts) in INDUSTRIES.items() for d in depts
}
# Service phrase -> department name, per industry (what the prior policy uses to route a goal).
SERVICE_TO_DEPARTMENT: dict[str, dict[str, str]] = {
    ind: {s: d.name for d in depts for s in d.services} for ind, (_, depts) in INDUSTRIES.items()
}

# Company-name parts (combined with the industry nouns above).
NAME_WORDS: tuple[str, ...] = (
    "Acme", "Summit", "Harbor", "Pioneer", "Evergreen", "Granite", "Beacon", "Cedar", "Liberty",
    "Northwind", "Silverline", "Bluewater", "Redwood", "Ironwood", "Keystone", "Meridian", "Horizon",
    "Riverbend", "Lakeshore", "Frontier", "Sterling", "Oakridge", "Prairie", "Copperfield", "Sunrise",
    "Westgate", "Highland", "Crescent", "Maple", "Aspen", "Juniper", "Falcon", "Orion", "Atlas",
    "Vertex", "Cobalt", "Harmony", "Trinity", "Sequoia", "Willow", "Canyon", "Coastal", "Heritage",
    "Landmark", "Monarch", "Patriot", "Quarry", "Rainier", "Sapphire", "Tidewater",
)
FIRST_NAMES: tuple[str, ...] = (
    "Ava", "Ben", "Chloe", "Daniel", "Elena", "Farid", "Grace", "Hiro", "Imani", "Jonas", "Keiko",
    "Liam", "Maya", "Noah", "Olivia", "Priya", "Quinn", "Rosa", "Samir", "Tara", "Umar", "Vera",
    "Wei", "Ximena", "Yusuf", "Zoe", "Marcus", "Nadia", "Oscar", "Lena",
)
LAST_NAMES: tuple[str, ...] = (
    "Anderson", "Brooks", "Chen", "Diaz", "Evans", "Fischer", "Garcia", "Hughes", "Ibrahim", "Jensen",
    "Kim", "Lopez", "Morgan", "Nguyen", "Okafor", "Patel", "Reyes", "Schmidt", "Tanaka", "Usman",
    "Valdez", "Walsh", "Young", "Zhang", "Rossi", "Kowalski", "Moreau", "Silva",
)
