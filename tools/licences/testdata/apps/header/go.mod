module example.com/header

go 1.22
