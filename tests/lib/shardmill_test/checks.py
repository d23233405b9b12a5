"""The check lines of the Python test drivers, one implementation: `ok   WHAT` or
`FAIL WHAT: DETAIL` per check, counted, and one closing `N passed, M failed` line whose return
value is the driver's exit status.

- Checks(name): a counter of its own; c.check(label, ok, detail) (or c.expect(ok, label,
  detail), the condition first) and c.done().
- check(ok, what, detail) and summary(): the same on one module-wide Checks, for drivers whose
  checks are plain functions.
"""


class Checks:
    """ok/FAIL lines and a closing count; exit status 1 on any failure (or no check at all when
    need_one)."""

    def __init__(self, name="", need_one=True):
        self.name = name
        self.need_one = need_one
        self.passed = 0
        self.failed = 0

    def check(self, label, ok, detail=""):
        """Prints and counts one check; returns ok as a bool, so a caller can stop on a failed
        precondition. A failure prints its detail on the same line (at most 3000 characters)."""
        if ok:
            self.passed += 1
            print(f"ok   {label}", flush=True)
        else:
            self.failed += 1
            detail = str(detail).strip().replace("\n", " | ")
            print(f"FAIL {label}" + (f": {detail[:3000]}" if detail else ""), flush=True)
        return bool(ok)

    def expect(self, ok, what, detail=""):
        """check() with the condition first, as the plain-function drivers call it."""
        return self.check(what, ok, detail)

    def done(self, extra=""):
        """Prints `[NAME: ]N passed, M failed` (then extra); returns the exit status."""
        prefix = f"{self.name}: " if self.name else ""
        print(f"{prefix}{self.passed} passed, {self.failed} failed{extra}", flush=True)
        return 1 if self.failed or (self.need_one and not self.passed) else 0


CHECKS = Checks(need_one=False)


def check(ok, what, detail=""):
    """One check on the module-wide CHECKS (ok first, as the plain-function drivers call it)."""
    return CHECKS.expect(ok, what, detail)


def summary(extra="", name=""):
    """CHECKS' closing line (`NAME: ` before it when given); returns the exit status: 1 on any
    failure."""
    CHECKS.name = name
    return CHECKS.done(extra)
