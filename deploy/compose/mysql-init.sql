-- Run once by the MySQL image on an empty data directory (mounted into
-- /docker-entrypoint-initdb.d by compose.yaml). Demo values for a private compose network only.
--
-- capstan's account: replication, SELECT and LOCK TABLES for the initial snapshot's per-chunk
-- table lock (as deploy/dev/services.sh grants it).
CREATE USER 'capstan'@'%' IDENTIFIED BY 'capstan-compose-pw';
GRANT REPLICATION SLAVE, REPLICATION CLIENT, SELECT, LOCK TABLES ON *.* TO 'capstan'@'%';

-- a demo table with a few rows for the initial snapshot
CREATE DATABASE shop;
CREATE TABLE shop.items (id INT PRIMARY KEY, name VARCHAR(40), price DECIMAL(10,2), added DATETIME(3));
INSERT INTO shop.items VALUES (10, 'fig', 3.10, NOW(3)), (11, 'kiwi', 0.80, NOW(3)), (12, 'plum', 1.20, NOW(3));
