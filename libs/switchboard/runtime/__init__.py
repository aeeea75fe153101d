"""Running Switchboard on one machine: embedded servers, the service registry, the supervisor."""
