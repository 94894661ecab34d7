"""TextWorld as a second world: games lfo did not write (Microsoft's TextWorld, `pip install -e '.[textworld]'`).

A layer beside the customer-service world (`lfo_cli.env`): games generated locally and deterministically
from a seed and cached under ``$LFO_HOME/textworld`` (:mod:`.games`), observations with the banner and status
noise stripped (:mod:`.text`), a TRL ``environment_factory`` class with one ``act`` tool (:mod:`.environment`),
and the gold and random reference policies with an episode runner (:mod:`.episodes`). Nothing here touches
Python's, numpy's or torch's global random state. ``textworld`` itself is imported only inside functions,
so the package imports without the extra and says how to install it when a game is needed.
"""
