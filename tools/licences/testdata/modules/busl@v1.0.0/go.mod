module example.com/busl

go 1.22
