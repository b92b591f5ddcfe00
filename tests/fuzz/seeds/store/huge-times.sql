update activities set start_ns = 9223372036854775000, end_ns = -9223372036854775000 where rowid % 2 = 0;
