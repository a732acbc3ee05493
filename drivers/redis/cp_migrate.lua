-- cp_migrate.lua (after prelude.lua, cp_prelude.lua, checkpoint.lua): a thread
-- of layout 1 to layout 2 (nothing else: a missing thread stays missing). KEYS
-- as for a put.
migrate()
return 1
