"""An exporter wrapper for the SDK test scripts: remembers each export's result."""


class Checked:
    """Wraps an exporter; appends the result of every export to `results`."""

    def __init__(self, inner, results):
        self.inner = inner
        self.results = results

    def export(self, batch):
        result = self.inner.export(batch)
        self.results.append(result)
        return result

    def shutdown(self):
        self.inner.shutdown()

    def force_flush(self, timeout_millis=30000):
        return True
