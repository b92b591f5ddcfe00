insert into strings values(-1,'x');
