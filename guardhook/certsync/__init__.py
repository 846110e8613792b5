"""The certificates guardhook manages itself (`serve --manage-certs`): a CA and a serving
certificate in a Secret, rotated before expiry, their CA bundle on guardhook's own webhook
configurations (`issue` plans, `apply` writes, `runner` runs it leader-elected)."""
