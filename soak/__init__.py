"""The soak and benchmark harness (``roost soak``)."""
