-- An erasure's record keeps a field's value as the sha256 of a random salt followed by the value (src/archive/
-- erasure.ts fieldDigest), the salt beside it; records written before this have no salt (an unsalted sha256).
ALTER TABLE erasures ADD COLUMN field_value_salt text;
