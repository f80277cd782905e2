#!/bin/bash
cd /workspace && git apply - <<'PATCH'
diff --git a/units/length.py b/units/length.py
index 205ff8a..db0875f 100644
--- a/units/length.py
+++ b/units/length.py
@@ -8,7 +8,7 @@ FACTORS = {
     "in": 0.0254,
     "ft": 0.3048,
     "yd": 0.9144,
-    "mi": 1609.0,
+    "mi": 1609.344,
 }
 
 
PATCH
