module example.com/nolicence

go 1.22
