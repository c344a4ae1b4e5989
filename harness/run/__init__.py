"""A conformance run inside pytest, one module per phase, each phase a plugin object with its own stash keys that
``layer_conformance.plugin`` (the entry point) registers at pytest_configure; none writes another's state, and what
one phase hands a later one is frozen:

- configure.py: what the run checks (options, targets, validated contracts) -> ``Configured`` (``CONFIGURED_KEY``);
  guard.py (the judge's imports before user code), executors.py (the run's executors, one owner);
- collection.py: contract files as collectors, one item per check, their order -> the plan (``PLAN_KEY``);
- running.py: each check's item and record, the journal -> ``Reported`` (``REPORTED_KEY``); records.py makes a
  record from a target or a node id;
- handover.py: what a phase hands a later one (``Plan``, ``Reported``, ``Ended``), each key with its one writer;
- session_end.py: the verdict asked once, the outputs written from the one result, the exit status set once
  (``layer_conformance.exitcodes.exit_status``).
"""
