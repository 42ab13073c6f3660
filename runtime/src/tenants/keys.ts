// Where a tenant's data lives outside the relational store, so the erase can find all of it by prefix.

/** Every blob of a tenant is stored under this key prefix. */
export const tenantBlobPrefix = (tenantId: string) => `tenants/${tenantId}/`;

/** Every run log, channel and counter of a tenant is keyed under this prefix on the event bus. */
export const tenantEventPrefix = (tenantId: string) => `tenants/${tenantId}/`;
