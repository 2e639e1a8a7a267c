module example.com/mitcmd

go 1.22

require example.com/mitlib v1.0.0
