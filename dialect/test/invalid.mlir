// RUN: staticify-mlir-opt %s -split-input-file -verify-diagnostics

func.func @negative(%n: index) -> index {
  // expected-error @+1 {{upper bound must be non-negative, got -1}}
  %k = staticify.bound %n max -1 : index
  return %k : index
}

// -----

func.func @too_wide(%n: i8) -> i8 {
  // expected-error @+1 {{upper bound 128 does not fit in 'i8'}}
  %k = staticify.bound %n max 128 : i8
  return %k : i8
}

// -----

func.func @float(%x: f32) -> f32 {
  // expected-error @+1 {{must be signless integer or index}}
  %k = staticify.bound %x max 1 : f32
  return %k : f32
}

// -----

func.func @types_differ(%n: i64) -> i32 {
  // expected-error @+1 {{all of {input, result} have same type}}
  %k = "staticify.bound"(%n) {upper = 4 : i64} : (i64) -> i32
  return %k : i32
}
