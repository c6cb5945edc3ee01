DROP TABLE tenant_api_keys;
DROP FUNCTION tenant_api_keys_notify();
