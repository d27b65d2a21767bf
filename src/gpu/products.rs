//! The A, B and C evaluations on the device: a recorded constraint system kept on the GPU
//! beside the parameters, and its products with a witness (`kernels/r1cs.cu`), written straight
//! into the buffers the H transforms work on. No a, b or c crosses PCIe or lives on the host.

use anyhow::{ensure, Result};

use super::device::{Gpu, Lane};
use super::kernels;
use super::limbs::{scalars_as_limbs, FR_LIMBS};
use super::memory::DevBuf;
use super::witness::{self, DeviceDensity};
use blstrs::Scalar as Fr;

use crate::groth16::{Density, PackedWitness, R1cs};

const BLOCK: u32 = 256;

/// One matrix on the device.
struct DeviceMatrix {
    ends: DevBuf<u32>,
    terms: DevBuf<u32>,
    rows: usize,
}

/// A circuit's recorded constraints on the device, with the densities its queries are
/// selected by.
pub struct DeviceR1cs {
    /// The circuit id they were recorded for.
    pub id: String,
    pub inputs: usize,
    pub aux: usize,
    pub rows: usize,
    matrices: [DeviceMatrix; 3],
    coeffs: DevBuf<u32>,
    a_aux_density: DeviceDensity,
    b_aux_density: DeviceDensity,
    /// A few hundred inputs at most: selected on the host.
    b_input_density: Density,
}

/// A partition's witness on the device: the values, and the A and B queries' scalars.
pub struct DeviceWitness {
    pub input: DevBuf<u32>,
    pub aux: DevBuf<u32>,
}

impl DeviceR1cs {
    /// Device bytes `r1cs` takes once uploaded.
    pub fn bytes_for(r1cs: &R1cs) -> usize {
        let m =
            |m: &crate::groth16::r1cs::SparseMatrix| (m.ends().len() + m.term_words().len()) * 4;
        m(&r1cs.a)
            + m(&r1cs.b)
            + m(&r1cs.c)
            + r1cs.coefficients().len() * FR_LIMBS * 4
            + DeviceDensity::bytes_for(&r1cs.a_aux_density)
            + DeviceDensity::bytes_for(&r1cs.b_aux_density)
    }

    pub fn upload(gpu: &Gpu, r1cs: &R1cs) -> Result<DeviceR1cs> {
        let matrix = |m: &crate::groth16::r1cs::SparseMatrix| -> Result<DeviceMatrix> {
            let ends = gpu.alloc::<u32>(m.ends().len())?;
            gpu.upload(&ends, 0, m.ends())?;
            let terms = gpu.alloc::<u32>(m.term_words().len())?;
            gpu.upload(&terms, 0, m.term_words())?;
            Ok(DeviceMatrix {
                ends,
                terms,
                rows: m.rows(),
            })
        };
        let coeffs = gpu.alloc::<u32>(r1cs.coefficients().len() * FR_LIMBS)?;
        gpu.upload(&coeffs, 0, scalars_as_limbs(r1cs.coefficients()))?;
        let uploaded = DeviceR1cs {
            id: r1cs.circuit_id.clone(),
            inputs: r1cs.inputs,
            aux: r1cs.aux,
            rows: r1cs.constraints(),
            matrices: [matrix(&r1cs.a)?, matrix(&r1cs.b)?, matrix(&r1cs.c)?],
            coeffs,
            a_aux_density: DeviceDensity::upload(gpu, &r1cs.a_aux_density)?,
            b_aux_density: DeviceDensity::upload(gpu, &r1cs.b_aux_density)?,
            b_input_density: r1cs.b_input_density.clone(),
        };
        gpu.sync_lane(Lane::Main)?;
        Ok(uploaded)
    }

    pub fn bytes(&self) -> usize {
        self.matrices
            .iter()
            .map(|m| m.ends.bytes() + m.terms.bytes())
            .sum::<usize>()
            + self.coeffs.bytes()
            + self.a_aux_density.bytes()
            + self.b_aux_density.bytes()
    }

    /// Scalars of the A query: every input, then the aux variables A uses.
    pub fn a_query_len(&self) -> usize {
        self.inputs + self.a_aux_density.count()
    }

    /// Scalars of the B query (G1 and G2): the inputs and aux variables B uses.
    pub fn b_query_len(&self) -> usize {
        self.b_input_density.count() + self.b_aux_density.count()
    }

    /// A packed witness of this circuit onto the device, expanded there (`gpu::witness`).
    pub fn witness(&self, gpu: &Gpu, w: &PackedWitness) -> Result<DeviceWitness> {
        ensure!(
            w.input.len() == self.inputs && w.aux.len() == self.aux,
            "a witness of {} inputs and {} aux variables for constraints recorded with {} and {}",
            w.input.len(),
            w.aux.len(),
            self.inputs,
            self.aux
        );
        let input = gpu.alloc::<u32>(self.inputs.max(1) * FR_LIMBS)?;
        gpu.upload(&input, 0, scalars_as_limbs(&w.input))?;
        let aux = witness::expand(gpu, &w.aux, self.aux)?;
        Ok(DeviceWitness { input, aux })
    }

    /// The A query's scalars: every input, then the aux values A uses (queued on the main lane).
    pub fn a_query(&self, gpu: &Gpu, w: &DeviceWitness, input: &[Fr]) -> Result<DevBuf<u32>> {
        self.check_inputs(input)?;
        let a = gpu.alloc::<u32>(self.a_query_len().max(1) * FR_LIMBS)?;
        gpu.upload(&a, 0, scalars_as_limbs(input))?;
        self.a_aux_density.select(gpu, &w.aux, &a, self.inputs)?;
        Ok(a)
    }

    /// The B query's scalars: the inputs and aux values B uses (queued on the main lane).
    pub fn b_query(&self, gpu: &Gpu, w: &DeviceWitness, input: &[Fr]) -> Result<DevBuf<u32>> {
        self.check_inputs(input)?;
        let b = gpu.alloc::<u32>(self.b_query_len().max(1) * FR_LIMBS)?;
        let b_inputs = self.b_input_density.select(input);
        gpu.upload(&b, 0, scalars_as_limbs(&b_inputs))?;
        self.b_aux_density.select(gpu, &w.aux, &b, b_inputs.len())?;
        Ok(b)
    }

    fn check_inputs(&self, input: &[Fr]) -> Result<()> {
        ensure!(
            input.len() == self.inputs,
            "{} inputs for constraints recorded with {}",
            input.len(),
            self.inputs
        );
        Ok(())
    }

    /// Queue matrix `which` (0 = A, 1 = B, 2 = C) times the witness (`aux` and `inputs`, device
    /// scalars) into `out`, `domain` scalars, zero past the last row. On the main lane.
    pub fn product(
        &self,
        gpu: &Gpu,
        which: usize,
        aux: &DevBuf<u32>,
        inputs: &DevBuf<u32>,
        out: &DevBuf<u32>,
        domain: usize,
    ) -> Result<()> {
        let m = &self.matrices[which.min(2)];
        ensure!(
            domain >= m.rows
                && out.len() >= domain * FR_LIMBS
                && aux.len() >= self.aux * FR_LIMBS
                && inputs.len() >= self.inputs * FR_LIMBS
                && u32::try_from(domain).is_ok(),
            "device products: buffers do not fit the recorded constraints"
        );
        let (rows, domain32) = (m.rows as u32, domain as u32);
        kernels::R1CS_ROWS.launch(
            gpu,
            domain32.div_ceil(BLOCK),
            BLOCK,
            (
                m.ends.ptr(),
                m.terms.ptr(),
                rows,
                domain32,
                self.coeffs.ptr(),
                aux.ptr(),
                inputs.ptr(),
                out.ptr(),
            ),
        )
    }
}
