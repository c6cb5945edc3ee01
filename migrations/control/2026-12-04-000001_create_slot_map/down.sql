DELETE FROM tenant_moves WHERE slots IS NOT NULL;
ALTER TABLE tenant_moves DROP CONSTRAINT tenant_moves_some_tenants,
    ADD CONSTRAINT tenant_moves_some_tenants CHECK (cardinality(tenants) > 0);
ALTER TABLE tenant_moves DROP COLUMN slots;
DROP TRIGGER _autumn_slot_map_changed ON _autumn_slot_map;
DROP FUNCTION _autumn_slot_map_notify();
DROP TABLE _autumn_slot_map;
