"""``ccltune ab``: the user's own job run interleaved across arms and judged (docs/ab.md).

``job.py`` runs the job once (through ``guard.py``, ``python -m ccltune.ab.guard``, which ends the job when
ccltune dies), ``rounds.py`` the arms' rounds, ``judge.py`` the statistics (pure), ``prune.py`` ``--prune``,
``rows.py`` its rows in the results database, ``commtime.py`` the ``comm`` metric from the profiler's files,
``fired.py`` which rules fired (also ``plugin verify --profile``). The options and the verdict's table:
``commands/ab.py``; the flags: ``cli/ab.py``; the report's view of an ab run: ``report/abview.py``.

Layer: above tune/validate/diagnose/workload (it reads the profiler's files through ``workload``), below
report (which draws ab's rows)."""
