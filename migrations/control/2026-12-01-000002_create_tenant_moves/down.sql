DROP TABLE tenant_move_members;
DROP TABLE tenant_moves;
