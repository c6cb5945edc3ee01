DROP TABLE _autumn_shard_directory;
DROP FUNCTION _autumn_shard_directory_notify();
