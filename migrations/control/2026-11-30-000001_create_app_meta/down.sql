DROP TABLE known_shards;
