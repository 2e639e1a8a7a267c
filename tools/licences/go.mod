module github.com/caravan-nomad/caravan/tools/licences

go 1.25.8

require (
	github.com/google/licenseclassifier/v2 v2.0.0
	github.com/shoenig/test v1.12.2
)

require (
	github.com/davecgh/go-spew v1.1.1 // indirect
	github.com/google/go-cmp v0.6.0 // indirect
	github.com/sergi/go-diff v1.1.0 // indirect
)
