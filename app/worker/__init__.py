"""Workers: claim due runs, execute them, heartbeat their leases, complete in batches."""
