"""kube-test-apiserver: a kube-apiserver stand-in for tests (see ../README.md)."""
