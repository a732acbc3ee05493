#!/usr/bin/env bash
# What a PostgreSQL store's checkpoints would cost sealed into segments that
# TOAST compresses (docs/performance.md, "Sealed segments"; a design not built).
# Builds a scratch table public.convo_segment_estimate from SCHEMA.checkpoints
# (each row's columns as bytes, N rows of one thread and namespace a segment),
# VACUUMs it, prints its total size per checkpoint, then drops it.
# usage: scripts/segment-estimate-pg.sh URL SCHEMA [N ...]   (N default: 8 16 32)
set -eu
url=${1:?usage: $0 URL SCHEMA [N ...]}; schema=${2:?usage: $0 URL SCHEMA [N ...]}
shift 2
[ $# -gt 0 ] || set -- 8 16 32
for n in "$@"; do
  for storage in extended main; do
    psql "$url" -q -At -v ON_ERROR_STOP=1 <<SQL
SET client_min_messages = warning;
DROP TABLE IF EXISTS public.convo_segment_estimate;
CREATE TABLE public.convo_segment_estimate(tid bigint, ns text, first_seq bigint,
  last_seq bigint, ids bytea, data bytea COMPRESSION pglz) WITH (fillfactor = 100);
ALTER TABLE public.convo_segment_estimate ALTER COLUMN ids SET STORAGE main;
ALTER TABLE public.convo_segment_estimate ALTER COLUMN data SET STORAGE $storage;
CREATE INDEX ON public.convo_segment_estimate(tid, ns, last_seq) WITH (fillfactor = 100);
INSERT INTO public.convo_segment_estimate
SELECT tid, checkpoint_ns, min(put_seq), max(put_seq),
       string_agg(checkpoint_id, ''::bytea ORDER BY put_seq),
       string_agg(int8send(put_seq) || int8send(log_length)
                  || int8send((extract(epoch FROM created_at) * 1e6)::int8)
                  || int4send(channel_set) || int4send(coalesce(body_type, 0))
                  || coalesce(parent_id, '') || convert_to(metadata, 'UTF8') || versions
                  || coalesce(body, '')
                  || coalesce((SELECT string_agg(w, ''::bytea) FROM unnest(writes) w), '')
                  || coalesce(vals, ''), ''::bytea ORDER BY put_seq)
  FROM (SELECT *, (row_number() OVER (PARTITION BY tid, checkpoint_ns ORDER BY put_seq) - 1) / $n AS g
          FROM "$schema".checkpoints) c
 GROUP BY tid, checkpoint_ns, g;
VACUUM ANALYZE public.convo_segment_estimate;
SELECT format('segment %s, storage %s: %s rows, %s B a checkpoint (today %s)', $n, '$storage', count(*),
       round(pg_total_relation_size('public.convo_segment_estimate')::numeric
             / (SELECT count(*) FROM "$schema".checkpoints), 1),
       round(pg_total_relation_size('"$schema".checkpoints')::numeric
             / (SELECT count(*) FROM "$schema".checkpoints), 1))
  FROM public.convo_segment_estimate;
DROP TABLE public.convo_segment_estimate;
SQL
  done
done
