DROP TABLE _autumn_secrets;
