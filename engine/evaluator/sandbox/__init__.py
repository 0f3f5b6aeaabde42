"""The OS sandbox every evaluation child runs in: namespaces, a uid of its own, cgroups and guards."""
