"""What a command leaves behind, reviewed after every run.

``leftovers`` (the watch and its report), ``rootreview`` (the review pass), ``quarantine``
(taking an entry out), ``report`` (its events), ``rootscan`` (the walk before a run),
``inotify`` (watches during it), ``run_ledger`` (durable records of runs in flight),
``git_probe`` (the daemon's one hermetic git).
"""
