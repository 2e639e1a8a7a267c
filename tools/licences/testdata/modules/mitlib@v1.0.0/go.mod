module example.com/mitlib

go 1.22
