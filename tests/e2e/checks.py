"""The pass/fail counter of the Python check scripts under tests/."""


class Checks:
    """check(ok, what): counts ok, prints "FAIL: what" otherwise (unless
    quiet), and returns ok so checks can be chained."""

    def __init__(self, quiet=False):
        self.passed = 0
        self.failed = 0
        self.quiet = quiet

    def __call__(self, ok, what):
        if ok:
            self.passed += 1
        else:
            self.failed += 1
            if not self.quiet:
                print("FAIL:", what)
        return ok

    def summary(self):
        """The closing line tests/run.sh reads."""
        return f"{self.passed} passed, {self.failed} failed"
