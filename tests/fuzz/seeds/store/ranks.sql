update ranks set rank = 2147483647; update activities set stream_id = 999999;
