DROP TABLE tenant_import_chunks;
DROP TABLE tenant_imports;
