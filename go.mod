module github.com/ethervia/ethervia

go 1.26
