package faultfs

// PageSize is the unit a torn write lands in, for the tests of tears.
const PageSize = pageSize
