-- a read transaction: the call sees one snapshot
BEGIN;
