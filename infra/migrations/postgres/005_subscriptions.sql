-- States stored for an address are looked up by address (across groups) when a profile gets it.
CREATE INDEX address_subscriptions_address ON address_subscriptions (workspace_id, address);
