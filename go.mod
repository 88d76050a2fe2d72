module github.com/fairrelay/fairrelay

go 1.26.0

tool github.com/magefile/mage

require github.com/magefile/mage v1.17.2
