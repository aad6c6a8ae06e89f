"""`hedgefs chaos`: seeded fault schedules against a local cluster under load (schedule.py, runner.py)."""
