-- A clinic: the schema of tests/test_onboarding.py and tests/test_policy_tools.py (not the
-- demo's). Doctors are public; patients, their visits and prescriptions are private, and
-- a prescription reaches its patient through its visit. The rows are generated, no one's.
CREATE TYPE sex AS ENUM ('female', 'male', 'other');
CREATE TABLE doctors (
    doctor_id integer PRIMARY KEY,
    name text NOT NULL,
    specialty text NOT NULL
);
CREATE TABLE patients (
    patient_id integer PRIMARY KEY,
    birth_year integer NOT NULL CHECK (birth_year BETWEEN 1900 AND 2025),
    sex sex NOT NULL,
    insured boolean NOT NULL
);
CREATE TABLE visits (
    visit_id integer PRIMARY KEY,
    patient_id integer NOT NULL REFERENCES patients,
    doctor_id integer NOT NULL REFERENCES doctors,
    visit_date date NOT NULL,
    kind text NOT NULL CHECK (kind IN ('checkup', 'emergency', 'follow-up')),
    cost numeric(10, 2) NOT NULL
);
CREATE TABLE prescriptions (
    prescription_id integer PRIMARY KEY,
    visit_id integer NOT NULL REFERENCES visits,
    drug text NOT NULL,
    days integer NOT NULL CHECK (days >= 1 AND days <= 90)
);
INSERT INTO doctors
SELECT i, 'doctor ' || i, (ARRAY['general', 'cardiology', 'paediatrics'])[1 + i % 3]
FROM generate_series(1, 12) AS i;
INSERT INTO patients
SELECT i, 1930 + (i * 37) % 90, (ARRAY['female', 'male', 'other'])[1 + i % 3]::sex, i % 4 <> 0
FROM generate_series(1, 2000) AS i;
INSERT INTO visits
SELECT i, 1 + (i * 7) % 2000, 1 + i % 12, DATE '2024-01-01' + (i * 13) % 365,
       (ARRAY['checkup', 'emergency', 'follow-up'])[1 + i % 3], 20 + (i * 11) % 300
FROM generate_series(1, 6000) AS i;
INSERT INTO prescriptions
SELECT i, 1 + (i * 5) % 6000, (ARRAY['amoxicillin', 'ibuprofen', 'metformin'])[1 + i % 3],
       1 + i % 90
FROM generate_series(1, 9000) AS i;
