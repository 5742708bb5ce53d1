"""Producer side of ttsfarm: submit text jobs to the farm and follow them by id."""
