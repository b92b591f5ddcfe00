drop table ranks;
