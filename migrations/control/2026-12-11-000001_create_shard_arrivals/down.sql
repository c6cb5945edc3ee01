DROP TABLE _autumn_shard_arrivals;
DROP SEQUENCE _autumn_arrival_epoch;
