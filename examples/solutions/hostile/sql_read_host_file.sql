SELECT count(*) FROM read_csv('/etc/passwd', header = false, sep = ':')
