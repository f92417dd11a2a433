// Package parquetfmt writes Arrow record batches (of arrowfmt's schemas) as
// Parquet files, for the files sink and for anything a user reads with a
// Parquet tool.
//
// It is a package of its own because arrow-go's Parquet writer pulls in
// compression codecs, compute, Flight and gRPC: only the packages that
// write Parquet (the files sink) should compile and link them, not every
// importer of arrowfmt.
package parquetfmt
