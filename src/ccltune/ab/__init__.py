"""``ccltune ab`` and ``ccltune search``: the user's own job judged by its own steps (docs/ab.md).

Whole-run arms: ``job.py`` runs the job once (through ``guard.py``, ``python -m ccltune.ab.guard``, which
ends the job when ccltune dies), ``rounds.py`` the arms' rounds, ``judge.py`` the verdicts (pure, through
``ccltune.stats``), ``prune.py`` ``--prune``, ``commtime.py`` the ``comm`` metric from the profiler's files,
``fired.py`` which rules fired (also ``plugin verify --profile``).
In-run arms (``ab --in-run``): ``schedule.py`` (the tuner plugin's schedule and period, its Python twin),
``armsfile.py`` (the arms file written, the arm logs read), ``steplines.py`` (the job's step lines stamped on
arrival), ``blocks.py`` (steps to blocks), ``gpu_period.py`` (the GPU step period from the profiler's files),
``inrun_judge.py`` (paired rounds of blocks), ``inrun.py`` (one run); ``candidates.py`` and ``search.py``
(``ccltune search``). Rows in the results database: ``ccltune.store`` (``AbSample``, like every other table).
The options and the tables: ``commands/ab.py``, ``commands/ab_inrun.py``, ``commands/search.py``; the flags:
``cli/ab.py``, ``cli/search.py``; the report's view of an ab run: ``report/abview.py``.

Layer: above tune/validate/diagnose/workload (it reads the profiler's files through ``workload``), below
report (which draws ab's rows)."""
