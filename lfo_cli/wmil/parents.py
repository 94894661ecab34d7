"""Parents: who decides transitions, rewards and task instances.

``DeterministicParent`` applies the task's batched rules (fast, the default: fix 5).

``LLMParent`` asks a language model instead -- through any OpenAI-compatible chat endpoint
(``--parent-url``, e.g. a local ``vllm serve``) or a local transformers model (the embedded
SmolLM2, offline). It never lets a bad reply hurt training:

- every reply is parsed and validated (JSON object, reward in [0, 1], every state field an integer
  in range; instances must be legal at the level);
- an invalid reply (or a transport error) is retried up to ``max_retries`` times, then the
  deterministic rule is used for that query and the failure is counted (``parent/invalid_replies``,
  ``parent/fallbacks``);
- identical queries are answered from an LRU cache (``parent/cache_hits``), failed ones included
  (they fall back at once rather than re-asking);
- agreement of the LLM's rewards with the task rules is measured (``parent/reward_agreement``),
  so a run says how much of its reward signal the LLM got right.
"""

from __future__ import annotations

import json
import os
import re
from collections import OrderedDict
from typing import Any, Protocol

import torch

from lfo_cli.errors import LfoError
from lfo_cli.wmil.envs import State
from lfo_cli.wmil.local_llm import load_local_chat_model
from lfo_cli.wmil.task_base import Task


class DeterministicParent:
    """Rule-based parent: the task's own batched rules."""

    name = "deterministic"

    def __init__(self, task: Task):
        self.task = task

    def reset(self, n: int, level: int, gen: torch.Generator) -> torch.Tensor:
        return self.task.sample(n, level, gen)

    def step(self, state: torch.Tensor, action: torch.Tensor, t: int) -> tuple[torch.Tensor, torch.Tensor]:
        return self.task.transition(state, action, t)

    def oracle_action(self, state: torch.Tensor, t: int) -> torch.Tensor:
        return self.task.oracle_action(state, t)

    def stats(self) -> dict[str, float]:
        return {}


# ---------------------------------------------------------------------------------------------
# Chat clients
# ---------------------------------------------------------------------------------------------
class ChatClient(Protocol):
    def chat(self, messages: list[dict[str, str]]) -> str: ...


def normalise_base_url(url: str) -> str:
    """``http://host:8000`` -> ``http://host:8000/v1`` (vLLM/OpenAI layout); explicit paths are kept."""
    import httpx

    try:
        parsed = httpx.URL(url)
    except Exception as exc:  # noqa: BLE001 - httpx raises several types for malformed URLs
        raise LfoError(f"parent URL {url!r} is not a valid URL ({exc})") from None
    if parsed.scheme not in ("http", "https") or not parsed.host:
        raise LfoError(f"parent URL {url!r} must be http(s)://host[:port][/v1]")
    base = url.rstrip("/")
    return base if parsed.path not in ("", "/") else base + "/v1"


class HTTPChatClient:
    """OpenAI-compatible ``POST {base}/chat/completions`` with httpx (greedy, short replies)."""

    def __init__(self, url: str, model: str = "default", timeout: float = 30.0, max_tokens: int = 96,
                 api_key: str | None = None, api_key_env: str = "OPENAI_API_KEY"):
        import httpx

        self.base = normalise_base_url(url)
        self.model, self.max_tokens, self.api_key_env = model, max_tokens, api_key_env
        # The key lives only in the client's headers: never in an attribute that is logged, saved or printed.
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self.client = httpx.Client(timeout=timeout, headers=headers)

    def check_reachable(self, timeout: float = 5.0) -> None:
        """Fail fast (LfoError -> exit 2) when nothing answers at the URL or it refuses the credentials;
        any other HTTP status is fine (not every server lists models)."""
        import httpx

        try:
            resp = self.client.get(self.base + "/models", timeout=timeout)
        except httpx.HTTPError as exc:
            raise LfoError(f"parent URL {self.base} is unreachable ({type(exc).__name__}: {exc})") from None
        if resp.status_code in (401, 403):
            has_key = "Authorization" in self.client.headers
            hint = (f"the key in ${self.api_key_env} was refused" if has_key else
                    f"set ${self.api_key_env} (or name another variable with --parent-api-key-env)")
            raise LfoError(f"parent URL {self.base} answered {resp.status_code} {resp.reason_phrase}: {hint}")

    def chat(self, messages: list[dict[str, str]]) -> str:
        body = {"model": self.model, "messages": messages, "temperature": 0.0, "max_tokens": self.max_tokens}
        resp = self.client.post(self.base + "/chat/completions", json=body)
        resp.raise_for_status()
        return resp.json()["choices"][0]["message"]["content"]


class LocalChatClient:
    """A local transformers chat model (default: the embedded SmolLM2-135M-Instruct), greedy decoding."""

    def __init__(self, name: str = "smollm2-135m", max_new_tokens: int = 48):
        self.name = name
        self.model, self.tokenizer = load_local_chat_model(name)
        self.max_new_tokens = max_new_tokens

    def chat(self, messages: list[dict[str, str]]) -> str:
        """Greedy reply. A local model lets us start the assistant turn with the reply's first
        character (``{`` or ``[``, taken from the prompt's "Reply with" line) -- a prefill, so a
        135M model answers in JSON more often; the reply is validated like any other."""
        prefill = "[" if "JSON list" in messages[-1]["content"] else "{"
        enc = self.tokenizer.apply_chat_template([*messages, {"role": "assistant", "content": prefill}],
                                                 continue_final_message=True, return_tensors="pt", return_dict=True)
        with torch.no_grad():
            out = self.model.generate(**enc, max_new_tokens=self.max_new_tokens, do_sample=False,
                                      pad_token_id=self.tokenizer.eos_token_id)
        return prefill + self.tokenizer.decode(out[0, enc["input_ids"].shape[1]:], skip_special_tokens=True)


# ---------------------------------------------------------------------------------------------
# LLM parent
# ---------------------------------------------------------------------------------------------
_JSON_RE = re.compile(r"(\{.*\}|\[.*\])", re.DOTALL)


def extract_json(text: str) -> Any:
    """The first JSON object/array in a reply (models like to wrap it in prose or code fences)."""
    text = text.strip()
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        pass
    m = _JSON_RE.search(text)
    if not m:
        raise ValueError("no JSON in reply")
    return json.loads(m.group(1))


class LLMParent:
    """Transitions, rewards and task instances from a chat model, validated, cached, with fallback."""

    name = "llm"

    def __init__(self, task: Task, client: ChatClient, max_retries: int = 2, cache_size: int = 4096,
                 instance_pool: int = 16, llm_instances: bool = True):
        if max_retries < 0:
            raise LfoError("parent max retries must be >= 0")
        self.task, self.client = task, client
        self.rules = DeterministicParent(task)
        self.max_retries, self.cache_size = max_retries, cache_size
        self.instance_pool, self.llm_instances = instance_pool, llm_instances
        self.cache: OrderedDict[str, Any] = OrderedDict()
        self.pools: dict[int, torch.Tensor] = {}
        self.counts = {"queries": 0, "llm_calls": 0, "cache_hits": 0, "invalid_replies": 0, "transport_errors": 0,
                       "fallbacks": 0, "reward_agree": 0, "reward_checked": 0, "invalid_instances": 0}

    # -- prompts ----------------------------------------------------------------------------
    def _system(self) -> str:
        fields = ", ".join(f'"{n}": integer 0..{c - 1}' for n, c in self.task.fields)
        return (f"You are the environment of a symbolic task. Rules: {self.task.description} "
                f"There are {self.task.num_actions} action symbols, 0..{self.task.num_actions - 1}. "
                f"A state is a JSON object with fields {{{fields}}}. Answer with JSON only.")

    def transition_prompt(self, row: torch.Tensor, action: int, t: int) -> str:
        state = State.from_row(self.task, row, t)
        example = json.dumps({"reward": 0, "next_state": state.attributes})
        return (f"{state.to_prompt()} action={action}\nReply with one JSON object like {example} "
                "(reward 1 if the action was correct, else 0; next_state = the state after the action).")

    def instances_prompt(self, level: int) -> str:
        example = json.dumps([State.from_row(self.task, r).attributes for r in self.task.sample(2, level, torch.Generator().manual_seed(level))])
        return (f"Difficulty level {level} of task {self.task.name}: {self.task.levels[level]}. "
                f"Reply with a JSON list of {self.instance_pool} different start states (objects with the state fields), "
                f"like {example}.")

    # -- querying ---------------------------------------------------------------------------
    def _ask(self, prompt: str, parse) -> Any | None:
        """Cached, validated, retried query; None when every attempt failed (caller falls back)."""
        self.counts["queries"] += 1
        if prompt in self.cache:
            self.cache.move_to_end(prompt)
            self.counts["cache_hits"] += 1
            return self.cache[prompt]
        messages = [{"role": "system", "content": self._system()}, {"role": "user", "content": prompt}]
        result = None
        for _ in range(self.max_retries + 1):
            self.counts["llm_calls"] += 1
            try:
                reply = self.client.chat(messages)
            except Exception:  # noqa: BLE001 - transport/server errors must never stop training
                self.counts["transport_errors"] += 1
                continue
            try:
                result = parse(reply)
                break
            except (ValueError, TypeError, KeyError, IndexError, json.JSONDecodeError):
                self.counts["invalid_replies"] += 1
        # failures are cached too (as None): an identical query falls back at once instead of
        # spending another round of retries on a model that already failed it
        self.cache[prompt] = result
        if len(self.cache) > self.cache_size:
            self.cache.popitem(last=False)
        return result

    def _parse_transition(self, reply: str) -> tuple[torch.Tensor, float]:
        obj = extract_json(reply)
        if not isinstance(obj, dict):
            raise ValueError("reply is not an object")
        reward = obj["reward"]
        if isinstance(reward, bool) or not isinstance(reward, int | float) or not 0.0 <= float(reward) <= 1.0:
            raise ValueError(f"reward {reward!r} not a number in [0, 1]")
        return self.task.validate_row(obj["next_state"]), float(reward)

    def _parse_instances(self, level: int):
        def parse(reply: str) -> torch.Tensor:
            obj = extract_json(reply)
            if isinstance(obj, dict):
                obj = obj.get("states", obj.get("instances", [obj]))
            if not isinstance(obj, list):
                raise ValueError("instances reply is not a list")
            rows = []
            for item in obj:
                try:
                    rows.append(self.task.validate_row(item))
                except ValueError:
                    self.counts["invalid_instances"] += 1
            if not rows:
                raise ValueError("no valid instance in reply")
            rows_t = torch.stack(rows)
            ok = self.task.instance_ok(rows_t, level)
            self.counts["invalid_instances"] += int((~ok).sum())
            if not ok.any():
                raise ValueError("no instance legal at this level")
            return torch.unique(rows_t[ok], dim=0)

        return parse

    # -- parent interface -------------------------------------------------------------------
    def reset(self, n: int, level: int, gen: torch.Generator) -> torch.Tensor:
        if not self.llm_instances:
            return self.rules.reset(n, level, gen)
        if level not in self.pools:
            pool = self._ask(self.instances_prompt(level), self._parse_instances(level))
            if pool is None:
                self.counts["fallbacks"] += 1
            self.pools[level] = pool if pool is not None else torch.empty(0, len(self.task.fields), dtype=torch.long)
        pool = self.pools[level]
        if len(pool) == 0:
            return self.rules.reset(n, level, gen)
        return pool[torch.randint(0, len(pool), (n,), generator=gen)].clone()

    def step(self, state: torch.Tensor, action: torch.Tensor, t: int) -> tuple[torch.Tensor, torch.Tensor]:
        rule_next, rule_reward = self.rules.step(state, action, t)
        nxt, reward = rule_next.clone(), rule_reward.clone()
        keys = torch.cat([state, action.view(-1, 1)], dim=1)
        uniq, inverse = torch.unique(keys, dim=0, return_inverse=True)
        for u, key in enumerate(uniq):  # one query per distinct (state, action) in the batch
            ans = self._ask(self.transition_prompt(key[:-1], int(key[-1]), t), self._parse_transition)
            idx = (inverse == u).nonzero().view(-1)
            if ans is None:
                self.counts["fallbacks"] += 1
                continue
            row, r = ans
            nxt[idx] = row
            reward[idx] = r
            self.counts["reward_checked"] += 1
            self.counts["reward_agree"] += int((float(r) > 0.5) == bool(rule_reward[idx[0]] > 0.5))
        return nxt, reward

    def oracle_action(self, state: torch.Tensor, t: int) -> torch.Tensor:
        return self.task.oracle_action(state, t)

    def stats(self) -> dict[str, float]:
        c = self.counts
        out = {f"parent/{k}": float(v) for k, v in c.items() if k not in ("reward_agree", "reward_checked")}
        if c["reward_checked"]:
            out["parent/reward_agreement"] = c["reward_agree"] / c["reward_checked"]
        return out

    def state_dict(self) -> dict:
        return {"counts": dict(self.counts)}

    def load_state_dict(self, state: dict) -> None:
        self.counts.update({k: int(v) for k, v in state.get("counts", {}).items()})


def make_parent(kind: str, task: Task, *, url: str | None = None, model: str = "smollm2-135m",
                max_retries: int = 2, timeout: float = 30.0, llm_instances: bool = True,
                api_key_env: str = "OPENAI_API_KEY"):
    """Build the parent named on the command line. ``llm`` + ``url`` -> HTTP (with the bearer token in the
    environment variable ``api_key_env``, when set); ``llm`` alone -> local model."""
    if kind == "deterministic":
        if url:
            raise LfoError("--parent-url needs --parent llm")
        return DeterministicParent(task)
    if kind != "llm":
        raise LfoError(f"unknown parent '{kind}' (known: deterministic, llm)")
    if url:
        client = HTTPChatClient(url, model=model, timeout=timeout, api_key=os.environ.get(api_key_env) or None,
                                api_key_env=api_key_env)
        client.check_reachable()
    else:
        client = LocalChatClient(model)
    return LLMParent(task, client, max_retries=max_retries, llm_instances=llm_instances)
