"""The check lines of the Python test drivers: `ok   WHAT` or `FAIL WHAT` per check, counted, and
one `N passed, M failed` summary whose return value is the driver's exit status. Imported
through PYTHONPATH (CTest sets it to tests/helpers), never through a sys.path patch."""

passed = 0
failed = 0


def check(ok, what):
    """Prints and counts one check; returns ok, so a caller can stop on a failed precondition."""
    global passed, failed
    print(("ok   " if ok else "FAIL ") + what, flush=True)
    if ok:
        passed += 1
    else:
        failed += 1
    return ok


def summary(extra=""):
    """Prints `N passed, M failed` (then extra) and returns the exit status: 1 on any failure."""
    print(f"{passed} passed, {failed} failed{extra}")
    return 1 if failed else 0
